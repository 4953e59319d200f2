module fixtures

go 1.26.0
