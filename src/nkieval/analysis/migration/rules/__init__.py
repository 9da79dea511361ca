"""One MIG rule per module; the registry lists them."""
