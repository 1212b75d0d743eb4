"""One rule per module; the registry discovers every ``Rule`` subclass here."""
