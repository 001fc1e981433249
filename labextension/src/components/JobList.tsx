/**
 * The sidebar's content: a header, the server's error if the last refresh failed, and the jobs.
 */
import React from 'react';

import { IJobListState } from '../model';
import { IJobActions, JobRow } from './JobRow';

export interface IJobListProps extends IJobListState {
  actions: IJobActions;
  onRefresh(): void;
}

export function JobList(props: IJobListProps): JSX.Element {
  const { jobs, total, loaded, error, actions } = props;
  const running = jobs.filter(job => job.active).length;
  return (
    <div className="nbt-JobList">
      <header className="nbt-JobList-header">
        <h2>nbtoolkit jobs</h2>
        <span className="nbt-JobList-count">
          {loaded ? `${running} running, ${total} in all` : ''}
        </span>
        <button
          className="nbt-Button"
          title="Refresh the job list"
          onClick={props.onRefresh}
        >
          Refresh
        </button>
      </header>
      {error && (
        <div className="nbt-JobList-error" role="alert">
          {error}
        </div>
      )}
      {!loaded && !error && <p className="nbt-JobList-note">Loading jobs…</p>}
      {loaded && jobs.length === 0 && (
        <p className="nbt-JobList-note">
          No jobs yet. Start one from a notebook with{' '}
          <code>nbtoolkit.api.launch(spec)</code> or from a terminal with{' '}
          <code>nbtoolkit run SPEC</code>; it shows here.
        </p>
      )}
      <ul className="nbt-JobList-jobs">
        {jobs.map(job => (
          <JobRow key={job.id} job={job} actions={actions} />
        ))}
      </ul>
      {loaded && total > jobs.length && (
        <p className="nbt-JobList-note">{`showing the newest ${jobs.length} of ${total}`}</p>
      )}
    </div>
  );
}
