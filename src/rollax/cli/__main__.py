"""``python -m rollax.cli``: the ``rollax`` command."""

if __name__ == "__main__":
    import sys

    from rollax.cli import main

    sys.exit(main())
