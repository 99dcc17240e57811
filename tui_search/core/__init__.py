"""The UI-free search core. Nothing in this package may import Textual or Rich."""
