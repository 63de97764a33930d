"""LLM-SQL, human state of the art: GGR with functional-dependency grouping (Liu et al., MLSys 2025).

Greedy recursive grouping as in the initial program, plus the paper's use of
functional dependencies: once rows are grouped on (column, value), every other column
whose value is the same throughout the group is moved right behind the grouping column,
so the whole shared run of fields is one prefix and is not searched again.
"""

from collections import Counter


def reorder(df):
    """GGR + functional dependencies; same contract as the initial program."""
    import pandas as pd

    columns = list(df.columns)
    rows = df.astype(str).values.tolist()
    plan = []
    stack = [(list(range(len(rows))), list(range(len(columns))), [])]
    while stack:
        row_ids, cols, prefix = stack.pop()
        if len(row_ids) <= 1 or not cols:
            plan.extend((r, prefix + cols) for r in row_ids)
            continue
        counts = Counter((c, rows[r][c]) for r in row_ids for c in cols)
        (col, value), count = max(counts.items(), key=lambda kv: len(kv[0][1]) * (kv[1] - 1))
        if count <= 1:
            plan.extend((r, prefix + cols) for r in row_ids)
            continue
        group = [r for r in row_ids if rows[r][col] == value]
        rest = [r for r in row_ids if rows[r][col] != value]
        first = rows[group[0]]
        shared = [c for c in cols if c != col and all(rows[r][c] == first[c] for r in group)]
        shared.sort(key=lambda c: -len(first[c]))
        stack.append((rest, cols, prefix))
        stack.append((group, [c for c in cols if c != col and c not in shared], prefix + [col] + shared))
    out_rows = [[rows[r][c] for c in order] for r, order in plan]
    orderings = [[columns[c] for c in order] for _, order in plan]
    return pd.DataFrame(out_rows), orderings
