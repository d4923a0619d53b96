/** TypeBox schemas of the model-version resource (DESIGN §3 `models`). */
import { Type } from 'typebox';
import { FreeObject, Nullable, StringEnum } from '../common.js';

export const Model = Type.Object({
  version: Type.String(),
  parent: Nullable(Type.String()),
  jobId: Nullable(Type.String(), { description: 'training job that produced it' }),
  status: StringEnum(['candidate', 'active', 'retired'] as const),
  metrics: FreeObject(),
  createdAt: Type.String({ format: 'date-time' }),
  loaded: Type.Boolean({ description: 'loaded in the engine now' }),
});

export const ModelList = Type.Object({ items: Type.Array(Model), active: Type.String() });

export const ModelParams = Type.Object({ version: Type.String({ minLength: 1, maxLength: 256 }) });
