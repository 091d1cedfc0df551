"""Each aggregate's SQL, in functions named for what they return (services hold the rules)."""
