"""Shipped rule packs (YAML data, never code). A pack named ``NAME`` lives in ``NAME.yaml`` here, or
``a/b.yaml`` for the dotted name ``a.b``; :func:`trajaudit.engine.packs.pack.load_pack` resolves them."""
