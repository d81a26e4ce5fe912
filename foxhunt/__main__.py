"""The `foxhunt` command (and `python -m foxhunt`): the compiled modules checked, then the CLI."""


def main() -> int:
    from foxhunt import compiled

    compiled.check()  # before any compiled module is imported: a stale one runs as its Python source
    from foxhunt.cli import main as cli

    return cli()


if __name__ == "__main__":
    raise SystemExit(main())
