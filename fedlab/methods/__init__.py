"""One package per method (config.py, method.py, client side, README.md); each registers itself in its own
`__init__.py` with `fedlab.registry.register_method`. The registry imports every package here."""
