"""Transaction Scheduling (TS, ADRS): order read/write transactions to minimise the makespan."""
