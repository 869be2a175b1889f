"""Console screens: the main views, run detail, and the small modal dialogs."""
