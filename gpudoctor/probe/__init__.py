"""gpudoctor probe: the machine report, sandboxed scenarios and supervised commands."""
