// defines no tests
