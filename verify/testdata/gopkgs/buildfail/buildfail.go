package buildfail

func Answer() int { return "forty-two" }
