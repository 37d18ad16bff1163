"""The edges: load data, compose the steps, log to MLflow, print and draw. Importing it needs no Hydra."""
