"""LLM-SQL prefix reuse: reorder rows and per-row fields so consecutive requests share long prefixes."""

from collections import Counter

# EVOLVE-BLOCK-START


def reorder(df):
    """Greedy recursive grouping (GGR, Liu et al., MLSys 2025).

    Pick the (column, value) that saves the most prefix characters if its rows are sent
    together with that field first (len(value) * (count - 1)), emit that group (recursing
    on its remaining columns), then recurse on the rows left over. Rows with no repeated
    value keep the table's column order.

    Args:
        df: pandas DataFrame of strings; each row becomes one LLM request whose fields are
            concatenated in the chosen order.

    Returns:
        (out_df, orderings): out_df has one row per request with the values in send order
        (its column labels do not matter); orderings[r] lists the original column names of
        out_df's row r, so every input row's (column, value) cells appear exactly once.
    """
    import pandas as pd

    columns = list(df.columns)
    rows = df.astype(str).values.tolist()
    plan = []  # (row index, column order)
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
        stack.append((rest, cols, prefix))  # handled after the group (stack order)
        stack.append((group, [c for c in cols if c != col], prefix + [col]))
    out_rows = [[rows[r][c] for c in order] for r, order in plan]
    orderings = [[columns[c] for c in order] for _, order in plan]
    return pd.DataFrame(out_rows), orderings


# EVOLVE-BLOCK-END
