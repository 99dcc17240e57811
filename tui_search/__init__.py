"""tui-search: search a folder of markdown from the keyboard."""

__version__ = "0.1.0"
