"""The agent server: the search core over the Model Context Protocol."""
