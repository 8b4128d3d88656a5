"""analysis.activation runs the network the fit trains, to the same numbers, with numpy alone."""

import json

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
        logits = net(torch.from_numpy(x)[None])[0]
        expected = torch.cat(
            [
                torch.sigmoid(logits[:2]),
                torch.softmax(logits[activation.METRE_ROWS], dim=0),
                torch.softmax(logits[activation.TEMPO_ROWS], dim=0),
            ]
        ).numpy()
    found = activation.Network.load(path)(x)
    assert found.shape == (len(activation.OUTPUTS), 3000) == (22, 3000)
    assert np.abs(found - expected).max() < 1e-5
    assert np.allclose(found[activation.METRE_ROWS].sum(axis=0), 1.0)
    assert np.allclose(found[activation.TEMPO_ROWS].sum(axis=0), 1.0)


def test_a_clip_s_metre_and_tempo_are_its_frames_mean():
    assert activation.METRE_CLASSES == tuple(meter.METRES)  # the metres the level model weighs
    assert (
        activation.TEMPO_BINS[0] <= meter.MIN_TEMPO and activation.TEMPO_BINS[-1] >= meter.MAX_TEMPO
    )
    probabilities = np.zeros((len(activation.OUTPUTS), 4))
    probabilities[activation.METRE_ROWS.start + 2, :] = 1.0  # 6/8 on every frame
    bins = np.array(activation.TEMPO_BINS)
    probabilities[activation.TEMPO_ROWS.start + 6, :2] = 1.0  # 160 BPM on half the frames
    probabilities[activation.TEMPO_ROWS.start + 7, 2:] = 1.0  # 179.6 on the other half
    assert activation.clip_metre(probabilities) == {"4/4": 0.0, "3/4": 0.0, "6/8": 1.0, "12/8": 0.0}
    assert bins[6] == 80.0 and activation.clip_tempo(probabilities, 80.0) == 0.5
    between = float(np.sqrt(bins[6] * bins[7]))  # halfway in octaves
    assert activation.clip_tempo(probabilities, between) == pytest.approx(0.5)
    assert activation.clip_tempo(probabilities, 60.0) == 0.0


def test_a_network_fitted_for_other_inputs_is_refused(tmp_path):
    from tunesmith.store.tensors import write_safetensors

    path = tmp_path / "other.safetensors"
    import torch

    write_safetensors(path, {"first.weight": torch.zeros(1)}, {"inputs": "[]"})
    with pytest.raises(ValueError, match="fitted for the inputs"):
        activation.Network.load(path)
    inputs = json.dumps(activation.INPUTS)
    write_safetensors(path, {"first.weight": torch.zeros(1)}, {"inputs": inputs})
    with pytest.raises(ValueError, match="fitted for the outputs"):
        activation.Network.load(path)  # a beat and a downbeat only: the earlier network


def test_the_bands_come_from_the_onset_strength_s_own_spectrum():
    rng = np.random.default_rng(1)
    mono = rng.normal(0, 0.1, 44100 * 3).astype(np.float32)
    full, low, bands = meter.onset_bands(mono)
    assert bands.shape == (len(activation.BAND_EDGES) - 1, len(full))
    assert all(map(np.array_equal, meter.onset_strength(mono), (full, low)))
    assert (bands >= 0).all() and bands.sum() > 0
