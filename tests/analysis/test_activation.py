"""analysis.activation runs the network the fit trains, to the same numbers, with numpy alone."""

import numpy as np
import pytest

from tests.analysis import fit_activation as study
from tunesmith.analysis import activation, meter


def test_the_numpy_network_gives_torch_s_activations(tmp_path):
    import torch

    torch.manual_seed(0)
    net = study.activation_network().eval()
    path = tmp_path / "activation.safetensors"
    study.save_network(net, path)
    x = np.random.default_rng(0).gamma(1.0, 1.0, (len(activation.INPUTS), 3000)).astype(np.float32)
    with torch.no_grad():
        expected = torch.sigmoid(net(torch.from_numpy(x)[None]))[0].numpy()
    found = activation.Network.load(path)(x)
    assert found.shape == (2, 3000)
    assert np.abs(found - expected).max() < 1e-5


def test_a_network_fitted_for_other_inputs_is_refused(tmp_path):
    from tunesmith.store.tensors import write_safetensors

    path = tmp_path / "other.safetensors"
    import torch

    write_safetensors(path, {"first.weight": torch.zeros(1)}, {"inputs": "[]"})
    with pytest.raises(ValueError, match="fitted for the inputs"):
        activation.Network.load(path)


def test_the_bands_come_from_the_onset_strength_s_own_spectrum():
    rng = np.random.default_rng(1)
    mono = rng.normal(0, 0.1, 44100 * 3).astype(np.float32)
    full, low, bands = meter.onset_bands(mono)
    assert bands.shape == (len(activation.BAND_EDGES) - 1, len(full))
    assert all(map(np.array_equal, meter.onset_strength(mono), (full, low)))
    assert (bands >= 0).all() and bands.sum() > 0
