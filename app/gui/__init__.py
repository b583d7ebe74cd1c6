"""The Qt window of Tailor."""
