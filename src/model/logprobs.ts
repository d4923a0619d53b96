/**
 * Token log-probabilities and entropies from logits: the one definition used by the model
 * (src/model/gpt.ts `tokenLogprobs`, `tokenEntropy`) and by training (src/training/maths/losses.ts).
 *
 * Shapes: logits `[B, T, V]` float32, targets `[B, T]` int32 token ids; results `[B, T]`, natural
 * logs / nats. Differentiable; inputs are not disposed.
 */
import * as tf from '@tensorflow/tfjs';

/** log pi(target | context) from logits: log_softmax(logits)[b, t, targets[b, t]], `[B, T, V]`, `[B, T]` -> `[B, T]`. */
export function logprobsFromLogits(logits: tf.Tensor3D, targets: tf.Tensor2D): tf.Tensor2D {
  return tf.tidy(() => {
    const logp = tf.logSoftmax(logits, -1); // log softmax over the vocabulary
    // oneHot in int32 then cast: the wasm OneHot kernel writes int32 bits when asked for float32.
    const onehot = tf.cast(tf.oneHot(tf.cast(targets, 'int32'), logits.shape[2]), 'float32');
    return tf.sum(tf.mul(logp, onehot), -1) as tf.Tensor2D; // gather logp[target]
  });
}

/** Entropy of the distribution at each position: H = -sum_v p_v log p_v (nats), `[B, T, V]` -> `[B, T]`. */
export function entropyFromLogits(logits: tf.Tensor3D): tf.Tensor2D {
  return tf.tidy(() => {
    const logp = tf.logSoftmax(logits, -1);
    return tf.neg(tf.sum(tf.mul(tf.exp(logp), logp), -1)) as tf.Tensor2D;
  });
}
