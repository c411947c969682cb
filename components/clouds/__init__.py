"""One module per cloud behind the interface in base.py; platform.py picks one."""
