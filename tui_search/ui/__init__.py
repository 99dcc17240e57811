"""The Textual app: a thin shell over the search core's ``SearchEngine`` facade."""
