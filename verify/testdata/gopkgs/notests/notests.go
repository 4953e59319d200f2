package notests

// Nothing is a function without tests.
func Nothing() {}
