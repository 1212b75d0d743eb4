"""The analysis's front end: a file's text read, gated, prescanned and parsed, and where its
nodes are. It never imports the interpreter (gpudoctor/lint/analysis), so the parts of the
linter that only read source (the cache, the reporters, noqa, the fixes) do not reach it."""
