"""Running untrusted candidate programs away from the host process."""
