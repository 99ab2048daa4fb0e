"""The tuned hybrid system as one command: its files and settings in a bundle directory
(``bundle``), and a source text translated through every step of the pipeline (``translate``)."""
