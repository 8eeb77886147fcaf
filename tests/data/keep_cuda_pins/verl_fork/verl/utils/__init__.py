"""A VERL fork from before verl.utils.device: its utils hold no device helpers."""
