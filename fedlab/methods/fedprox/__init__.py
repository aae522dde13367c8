"""FedProx: FedAvg on the server; the client adds (μ/2)‖φ − φ^(t)‖² to its loss."""
