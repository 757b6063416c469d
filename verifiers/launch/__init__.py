"""Starting a verification: the runner, the judge process's start, integrity of what it reads."""
