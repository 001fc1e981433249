import { execFileSync } from 'child_process';
import { join } from 'path';

const LAB = join(__dirname, '..', '..');

describe('api.gen.ts', () => {
  it('is what openapi-typescript makes of the server API document (run `make api-types` when it is not)', () => {
    // redocly.yaml names the document and the file; --check compares without writing and exits 1 on a difference
    const check = () =>
      execFileSync(
        join(LAB, 'node_modules', '.bin', 'openapi-typescript'),
        ['--check'],
        {
          cwd: LAB,
          stdio: 'pipe'
        }
      );
    expect(check).not.toThrow();
  });
});
