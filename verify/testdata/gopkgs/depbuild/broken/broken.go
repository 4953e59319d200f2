package broken

func Value() int { return undefinedName }
