"""LLM-SQL heuristic baseline: one column order for all rows (fewest distinct values first), rows sorted."""


def reorder(df):
    """Order columns by ascending cardinality, then sort the rows lexicographically in that order."""
    columns = sorted(df.columns, key=lambda c: (df[c].nunique(), list(df.columns).index(c)))
    out = df[columns].astype(str).sort_values(by=columns, kind="stable").reset_index(drop=True)
    return out, [list(columns)] * len(out)
