"""Test-only machinery shipped with the daemon, off unless a test turns it on
(an environment variable read once at start-up). Nothing in production code
depends on it beyond the lines in ``daemon.run`` that install it."""
