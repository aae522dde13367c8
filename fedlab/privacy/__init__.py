"""Local differential privacy (DP-SGD and update-level noise) and its accounting."""
from fedlab.privacy.accountant import PrivacyLedger
from fedlab.privacy.dpsgd import DPSGDModule, clip_and_noise, privatize_update

__all__ = ["DPSGDModule", "PrivacyLedger", "clip_and_noise", "privatize_update"]
