/**
 * The run doctor's REST calls: a running job's health (per-rank table), its ranks' stacks, a checkpoint
 * now, a fork with changed settings. Types from api.gen.ts, like handler.ts's.
 */
import { ServerConnection } from '@jupyterlab/services';
import { URLExt } from '@jupyterlab/coreutils';

import { components } from './api.gen';
import { requestAPI } from './handler';

type Schemas = components['schemas'];

export type IJobHealth = Schemas['JobHealth'];
export type IRankHealth = Schemas['RankHealth'];
export type IStacksReply = Schemas['StacksReply'];
export type ICheckpointReply = Schemas['CheckpointReply'];
export type IForkReply = Schemas['ForkReply'];

/** What the detail view needs; its tests give it a fake. */
export interface IDoctorAPI {
  health(id: string): Promise<IJobHealth>;
  stacks(id: string): Promise<IStacksReply>;
  checkpoint(id: string): Promise<ICheckpointReply>;
  /** `settings`: FIELD=VALUE items, e.g. train.learning_rate=1e-4. */
  fork(
    id: string,
    settings: string[],
    checkpoint?: string
  ): Promise<IForkReply>;
}

export class DoctorClient implements IDoctorAPI {
  constructor(private readonly settings = ServerConnection.makeSettings()) {}

  health(id: string): Promise<IJobHealth> {
    return requestAPI<IJobHealth>(path(id, 'health'), {}, this.settings);
  }

  stacks(id: string): Promise<IStacksReply> {
    return this.post<IStacksReply>(path(id, 'stacks'));
  }

  checkpoint(id: string): Promise<ICheckpointReply> {
    return this.post<ICheckpointReply>(path(id, 'checkpoint'));
  }

  fork(
    id: string,
    settings: string[],
    checkpoint?: string
  ): Promise<IForkReply> {
    const query = settings.map(item => `set=${encodeURIComponent(item)}`);
    if (checkpoint) {
      query.push(`checkpoint=${encodeURIComponent(checkpoint)}`);
    }
    return this.post<IForkReply>(
      path(id, 'fork') + (query.length ? `?${query.join('&')}` : '')
    );
  }

  private post<T>(endPoint: string): Promise<T> {
    return requestAPI<T>(endPoint, { method: 'POST' }, this.settings);
  }
}

function path(id: string, action: string): string {
  return URLExt.join('jobs', encodeURIComponent(id), action);
}
