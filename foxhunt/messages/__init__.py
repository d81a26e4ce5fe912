"""The vocabulary every layer shares: frozen, tagged msgspec Structs and their one codec."""
