"""One function per command: names or specs in, result objects out. Notebooks call these too."""
