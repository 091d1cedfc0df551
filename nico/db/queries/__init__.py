"""The SQL of each aggregate, one module per aggregate; functions are named for what they return."""
