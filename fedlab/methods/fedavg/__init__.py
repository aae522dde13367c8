"""FedAvg: clients fine-tune LoRA from the global state; the server averages the updates weighted by
the clients' example counts."""
