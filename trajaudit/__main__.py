"""``python -m trajaudit`` runs the command line."""

from trajaudit.cli import main

main()
