"""Tools on top of the engine: benchmarks, the results report, training
curves, the retrieval page and the word-order analysis. Run each with
`python -m tools.<name>`."""
