"""``gpudoctor server``: the linter's findings in an editor, over the Language Server
Protocol (server.py), linted by a session that outlives its runs (session.py)."""
