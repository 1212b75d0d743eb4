"""The analysis's front end: a file's text read, gated, prescanned and parsed, and where its
nodes are. It never imports the interpreter (gpudoctor/lint/analysis), so what only reads
source (the reporters, noqa, the cache's facts, the worker pool's prescans) does not load it."""
