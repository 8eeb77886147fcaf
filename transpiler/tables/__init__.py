"""Tables of API names as data: the mapping tables, user tables and the API snapshot facts."""
