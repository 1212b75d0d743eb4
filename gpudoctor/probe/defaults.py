"""The probe's default thresholds and bounds: what its options default to and allow, read by
the option parser and by the commands it hands over to (no imports: anything may read it)."""

# A supervised program may legitimately wait a long time; a scenario's workers
# either finish in seconds or never.
HANG_AFTER_COMMAND = 30.0
HANG_AFTER_SCENARIO = 3.0
# The longest --watch: an attached tree is sampled every half second, and every sample is
# kept (in memory, in the JSON and in the HTML chart). A tree that made no CPU progress
# for an hour is as idle as one watched for a day; a typo (--watch 1e20) would never end.
MAX_WATCH = 3600.0
# The longest --grace: a process that has not ended an hour after SIGTERM will not end on
# its own; a typo (--grace 1e308) would make every stop wait for ever. 0: SIGKILL at once.
MAX_GRACE = 3600.0
# How many children in a row may fail the same way before the tree is a crash loop and
# stopped. A spawn Pool started at import time (no main guard) replaces its dying workers
# for ever, two to four a second on a loaded 2-core machine; a program that starts a
# handful of processes which all fail the same way once is not a loop, and ends by itself.
CRASH_LOOP = 20
# The smallest --memory-limit: one Python interpreter alone takes about 10 MiB, so a
# smaller budget would stop any tree at its first look, whatever it does.
MIN_MEMORY_LIMIT = 1 << 20
