import { adminViews } from './admin';
import { resourceBrowser } from './resources';
import { json } from './api';
import { currentToken, describeSession, signIn, smartConfiguration, useToken, type Me } from './session';
import { terminologyBrowser } from './terminology';
import { byId } from './dom';

/** The console page: session (token), tabs, the terminology and resource browsers, the administrators' views. */
function main(): void {
  const state = byId('session-state');
  const tokenInput = byId<HTMLInputElement>('token');
  // Who the page acts as, asked of the server each time the token changes (a pasted token may be refused).
  let asked = 0;
  const showState = () => {
    const turn = ++asked;
    if (!currentToken()) {
      state.textContent = 'No token';
      return;
    }
    state.textContent = 'Checking the token...';
    json<Me>('/auth/me').then(
      (me) => {
        if (turn === asked) state.textContent = `Signed in as ${describeSession(me)}`;
      },
      (err: unknown) => {
        if (turn === asked) state.textContent = `Token not accepted (${(err as Error).message})`;
      },
    );
  };
  byId<HTMLFormElement>('session').addEventListener('submit', (event) => {
    event.preventDefault();
    useToken(tokenInput.value.trim() || undefined);
    tokenInput.value = '';
    showState();
  });
  byId('forget').addEventListener('click', () => {
    useToken(undefined);
    showState();
  });
  showState();
  void smartConfiguration().then((config) => {
    if (!config) return;
    const login = byId('login');
    const form = byId<HTMLFormElement>('signin');
    const problem = byId('signin-problem');
    login.hidden = false;
    login.addEventListener('click', () => {
      form.hidden = !form.hidden;
    });
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const data = new FormData(form);
      problem.textContent = '';
      signIn(config, String(data.get('email') ?? ''), String(data.get('password') ?? '')).then(
        () => {
          form.reset();
          form.hidden = true;
          showState();
        },
        (err: unknown) => {
          problem.textContent = (err as Error).message;
        },
      );
    });
  });

  for (const tab of document.querySelectorAll<HTMLButtonElement>('.tab')) {
    tab.addEventListener('click', () => {
      for (const other of document.querySelectorAll<HTMLButtonElement>('.tab')) {
        const selected = other === tab;
        other.setAttribute('aria-selected', String(selected));
        byId(other.dataset.tab ?? '').hidden = !selected;
      }
    });
  }
  terminologyBrowser();
  resourceBrowser();
  adminViews();
}

main();
