"""The evaluation harness behind ``tui-search eval``: judged datasets, metrics, reports."""
