"""One NKI rule per module (``nkiNNN_<name>.py``); the registry lists them."""
