"""The ground floor: what every other package may use and which imports none
of them. Errors and the command runner (`errors`), checked file I/O
(`files`), the experiment config machinery (`config`), retrieval metrics
(`metrics`), progress bars (`progress`) and training diagnostics
(`diagnostics`)."""
